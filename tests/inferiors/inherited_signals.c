/* inherited_signals.c: runs only with SIGUSR2 ignored, as it may inherit through exec from a
 * shell's job or a parent (tests/integration/test_record_replay_counting.py): it raises
 * SIGUSR2 (which then vanishes), prints what it saw and exits 0; with SIGUSR2 at its default
 * it is killed instead. */
#include <signal.h>
#include <stdio.h>

int main(void)
{
    struct sigaction old;
    sigaction(SIGUSR2, 0, &old);
    raise(SIGUSR2);
    printf("usr2_ignored=%d\n", old.sa_handler == SIG_IGN);
    fflush(stdout);
    return 0;
}
