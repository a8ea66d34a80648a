/*
 * toml-keys: print every key the tgproxy.toml loader accepts, from its own tables
 * (config_keys_foreach), one tab-separated line each:
 *   section  key  kind  min  max  note  table
 * tools/man/gen_toml_man.py turns this into docs/man/tgproxy.toml.5 and checks the
 * committed page against it (ctest proxy/man_toml_keys).
 */
#include <stdio.h>

#include "proxy/config/config.h"

static int print_key(const struct config_key *k, void *arg)
{
    (void)arg;
    static const char *const notes[] = {"-", "ignored", "deprecated"};
    return printf("%s\t%s\t%s\t%llu\t%llu\t%s\t%s\n", k->section[0] ? k->section : "-", k->name,
                  k->kind[0] ? k->kind : "-", (unsigned long long)k->min,
                  (unsigned long long)k->max, notes[k->note], k->table) < 0;
}

int main(void)
{
    if (config_keys_foreach(print_key, NULL) || fflush(stdout) != 0) {
        perror("toml-keys: writing the key list");
        return 74;
    }
    return 0;
}
