/* The umbrella header compiles on its own and names every room's API, and no public header names a
 * cJSON type (public JSON is a string: ARCHITECTURE.md, "API shape"; CMakeLists.txt's
 * ts_header_check compiles each header alone the same way). */
#pragma GCC poison cJSON
#include "tessera/tessera.h"

#include "tst.h"

int main(void) {
  CHECK(ts_version()[0] != 0, "version");
  CHECK(strcmp(ts_strerror(TS_OK), "ok") == 0, "strerror");
  return tst_finish();
}
