/* Test firmware: search_check with a reference that takes the last index
 * on a tie, so the check disagrees with the layer (it proves the check can
 * fail). */
#define SEARCH_CHECK_BROKEN 1
#include "../search_check/ftl.c"
