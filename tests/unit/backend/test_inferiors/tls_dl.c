/* tls_dl.c: a library the tls test program dlopens (built with -shared -fPIC by the test):
 * dynamic TLS that only threads touching dl_tls get storage for. */
__thread int dl_tls = 9;
void dl_tls_set(int value) { dl_tls = value; }
