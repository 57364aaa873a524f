/* Test firmware: ftl_copyback with a wrong use of the modified copyback:
 * it passes the write buffer's start as the new data, where the API takes
 * the address of the first modified sector, so a write at an offset in a
 * page stores other sectors of the buffer (an earlier request's data). */
#define MINIMAL_MODIFIED_COPYBACK 1
#define MINIMAL_BUG_COPYBACK_ADDRESS 1
#include "../../../../../examples/jasmine/ftl_minimal/ftl.c"
