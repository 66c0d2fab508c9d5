/* The umbrella header compiles on its own and names every room's API. */
#include "tessera/tessera.h"

#include "tst.h"

int main(void) {
  CHECK(ts_version()[0] != 0, "version");
  CHECK(strcmp(ts_strerror(TS_OK), "ok") == 0, "strerror");
  return tst_finish();
}
