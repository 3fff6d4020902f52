/* branches.c: the btrace / stepbranch inferior. See branches.h for the region.
 *
 * Tests rely on: main calls region() once (warm-up, binds PLT entries), then trace_begin(),
 * region() once (the traced region), trace_end(), and exits 0. The instructions executed
 * from trace_begin's breakpoint address to trace_end's breakpoint address are the same in
 * every run (tests count them with stepi).
 */
#include "branches.h"

int main(void)
{
    sink = region();
    trace_begin();              /* LINE:call-trace-begin */
    sink = region();            /* LINE:traced-call */
    trace_end();                /* LINE:call-trace-end */
    return 0;
}
