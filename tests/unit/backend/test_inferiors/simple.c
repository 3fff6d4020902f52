// Exits with argc + 10 if BS_FLAG is set; calls marker() so tests can break there.
#include <stdlib.h>
int global_counter = 0;
__attribute__((noinline)) void marker(void) { global_counter += 1; }
int main(int argc, char** argv) {
  (void)argv;
  marker();
  global_counter = 5;
  marker();
  return argc + (getenv("BS_FLAG") ? 10 : 0);
}
