/* signals.c: raises SIGUSR1 three times; the handler increments sig_count.
 *
 * Tests rely on:
 *   - on_usr1() is the handler; sig_count counts its runs;
 *   - after_signals() is called once after the three raise() calls;
 *   - exit code = sig_count (3 when the debugger passes SIGUSR1, 0 when it does not).
 */
#include <signal.h>

volatile int sig_count = 0;

static void on_usr1(int sig)
{
    (void)sig;
    sig_count++;                /* LINE:handler */
}

void after_signals(void)
{
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    signal(SIGUSR1, on_usr1);
    for (int i = 0; i < 3; i++)
        raise(SIGUSR1);         /* LINE:raise */
    after_signals();
    return sig_count;
}
