#include "../../../../../examples/jasmine/ftl_minimal/ftl.h"
