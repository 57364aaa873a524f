/* ftl_buggy — ftl_minimal with one known bug (see ftl.c). */
#include "../ftl_minimal/ftl.h"
