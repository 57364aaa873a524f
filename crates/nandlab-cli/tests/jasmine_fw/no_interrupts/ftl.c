/* Test firmware: ftl_minimal without its interrupt set-up (INTR_MASK stays
 * 0), so the board never calls its ftl_isr: a failed erase goes unseen
 * and the FTL programs the bad block. */
#define MINIMAL_BUG_NO_INTERRUPTS 1
#include "../../../../../examples/jasmine/ftl_minimal/ftl.c"
