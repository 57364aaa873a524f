#include "../common_ftl.h"
