/*
 * ftl_buggy — ftl_minimal with one known bug, to prove that nandlab's
 * checks reach through the Jasmine layer: a partial-page write over an
 * existing page forgets to read the sectors after the written range
 * (the "right hole"), so they come back stale or erased on the next read.
 */
#define MINIMAL_BUG_FORGET_RIGHT_HOLE 1
#include "../ftl_minimal/ftl.c"
