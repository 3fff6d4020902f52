/* segv.c: writes through a NULL pointer at the line marked LINE:segv (in crash()),
 * called from main. Never exits normally. */
#include <stddef.h>

int *volatile target = NULL;

void crash(void)
{
    *target = 42;               /* LINE:segv */
}

int main(void)
{
    crash();
    return 0;
}
