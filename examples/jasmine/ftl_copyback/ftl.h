/* ftl_copyback — ftl_minimal with modified copybacks (see ftl.c). */
#include "../ftl_minimal/ftl.h"
