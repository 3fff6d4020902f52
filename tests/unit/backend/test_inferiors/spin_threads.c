// Main plus two threads, all running until killed (attach to a threaded process).
#include <pthread.h>
#include <unistd.h>
static void* body(void* arg) { (void)arg; for (;;) usleep(1000); return 0; }
int main(void) {
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], 0, body, 0);
  for (;;) usleep(1000);
}
