/* branches_signal.c: a signal handler runs inside the traced region.
 *
 * Tests rely on: main installs on_usr1 for SIGUSR1, warms up (region() and one raise with the
 * handler, so every PLT entry is bound), then trace_begin(), region(), raise(SIGUSR1) (the
 * handler on_usr1 calls in_handler() and increments handled), region(), trace_end().
 * Exit code = handled (2 when the debugger passes both SIGUSR1s).
 */
#include <signal.h>
#include "branches.h"

volatile int handled = 0;

void in_handler(void) { handled++; }

static void on_usr1(int sig)
{
    (void)sig;
    in_handler();               /* LINE:handler */
}

int main(void)
{
    signal(SIGUSR1, on_usr1);
    sink = region();
    raise(SIGUSR1);             /* LINE:warmup-raise */
    trace_begin();
    sink = region();
    raise(SIGUSR1);             /* LINE:traced-raise */
    sink = region();
    trace_end();
    return handled;
}
