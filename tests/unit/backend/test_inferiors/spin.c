// Runs until killed (attach, interrupt tests).
#include <unistd.h>
volatile unsigned long spins = 0;
int main(void) {
  for (;;) { spins++; if ((spins & 0xfffff) == 0) usleep(1000); }
}
