/* A program built against the installed libtgbot: header and library must agree. */
#include <stdio.h>
#include <string.h>
#include <tgbot/tgbot.h>

int main(void)
{
    if (tg_version_num() != TG_VERSION_NUM) {
        fprintf(stderr, "header %d, library %d\n", TG_VERSION_NUM, tg_version_num());
        return 1;
    }
    if (strcmp(tg_strerror(TG_ERR_API), "Bot API error") != 0)
        return 1;
    printf("libtgbot %s\n", tg_version());
    return 0;
}
