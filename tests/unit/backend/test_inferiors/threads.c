// Three threads each call hit() once; exits 0.
#include <pthread.h>
__attribute__((noinline)) void hit(int i) { __asm__ volatile("" ::"r"(i)); }
static void* body(void* arg) { hit((int)(long)arg); return 0; }
int main(void) {
  pthread_t t[3];
  for (long i = 0; i < 3; ++i) pthread_create(&t[i], 0, body, (void*)i);
  for (int i = 0; i < 3; ++i) pthread_join(t[i], 0);
  return 0;
}
