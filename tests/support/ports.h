/*
 * ports.h: ports for programs under test (no cmocka, so benchmarks use it too).
 */
#ifndef TGKIT_TEST_PORTS_H
#define TGKIT_TEST_PORTS_H

/* A TCP port for a program under test that must be told its port before it listens (and
 * cannot take port 0): one below the kernel's ephemeral range (ip_local_port_range), free on
 * 0.0.0.0 when asked, and different in each test process. A port taken by binding port 0 and
 * closing is the wrong choice there: any connect() on the machine may be handed the same
 * number before the program binds it. 0 (with a line on stderr) when none is free. */
int tgtest_listen_port(void);

#endif
