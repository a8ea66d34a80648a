/*
 * tgproxy: MTProto proxy daemon. Everything lives in tgproxy_lib; see cli.h.
 */
#include <stdio.h>

#include "proxy/daemon/cli.h"

int main(int argc, char **argv)
{
    return cli_main(argc, argv, stdout, stderr);
}
