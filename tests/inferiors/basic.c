/* basic.c: the general-purpose inferior of the integration tests.
 *
 * Tests rely on:
 *   - globals: int counter (starts 0, +1 per compute() call), int global_value (42, set to 43
 *     by marker()), long accum;
 *   - compute(int x) returns 2*x+1 and is called from main's loop for x = 0..4 (5 calls);
 *     its local `doubled` is 2*x;
 *   - main's locals: local_sum (25 after the loop), values[4] (sorted by qsort with by_value(),
 *     so a breakpoint in by_value() has qsort (libc) in its backtrace);
 *   - marker() is called once, after the loop;
 *   - lines are found by grepping the LINE:<name> comments, never hard-coded;
 *   - output "sum=25 counter=5"; exit code 7.
 */
#include <stdio.h>
#include <stdlib.h>

int counter = 0;
int global_value = 42;
long accum = 0;

int compute(int x)
{
    int doubled = x * 2;        /* LINE:compute-body */
    counter++;                  /* LINE:counter-inc */
    accum += doubled;
    return doubled + 1;         /* LINE:compute-return */
}

static int by_value(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;   /* LINE:by-value */
    return (x > y) - (x < y);
}

void marker(void)
{
    global_value = 43;          /* LINE:marker-body */
}

int main(void)
{
    int local_sum = 0;          /* LINE:main-start */
    int values[4] = {4, 2, 3, 1};
    for (int i = 0; i < 5; i++) {
        local_sum += compute(i);    /* LINE:loop-body */
    }
    qsort(values, 4, sizeof values[0], by_value);   /* LINE:after-loop */
    marker();                   /* LINE:call-marker */
    printf("sum=%d counter=%d\n", local_sum, counter);  /* LINE:print */
    return 7;                   /* LINE:return */
}
