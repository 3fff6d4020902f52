/* tls_static.c: tls.c linked statically (see tests/inferiors/CMakeLists.txt), without its
 * shared libraries: GDB asks for the executable's TLS with lm 0 (no link_map). */
#define TLS_STATIC 1
#include "tls.c"
