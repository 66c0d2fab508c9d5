/* Winograd F(2,3) / F(4,3) transform matrices as compile-time constants, shared by the vector
 * schedules of every level (conv_wino_avx512_inl.h, conv_winograd_cl_avx2.c), so that their
 * unrolled transforms fold every coefficient: zero terms vanish and +-1 become adds. They are
 * conv_winograd.c's points (F(2,3): 0, 1, -1; F(4,3): 0, 1, -1, 1/2, -2); each level's setup
 * checks they equal the plan's matrices. No intrinsics: any file may include it. */
#ifndef TS_CONV_WINO_CONSTS_H
#define TS_CONV_WINO_CONSTS_H

enum { AM = 6 }; /* largest tile side; also the leading dimension of ts__wino_geom's BT / AT */

static const float BT2[AM][AM] = {{-1, 0, 1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, -1, 0, 1}};
static const float AT2[4][AM] = {{1, 1, 1, 0}, {0, 1, -1, 1}};
static const float BT4[AM][AM] = {{1, -1.5f, -2, 1.5f, 1, 0},  {0, -1, 0.5f, 2.5f, 1, 0},
                                  {0, 1, -2.5f, 0.5f, 1, 0},   {0, -2, -1, 2, 1, 0},
                                  {0, 0.5f, -1, -0.5f, 1, 0},  {0, 1, -1.5f, -2, 1.5f, 1}};
static const float AT4[4][AM] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 0.5f, -2, 0}, {0, 1, 1, 0.25f, 4, 0}, {0, 1, -1, 0.125f, -8, 1}};

#endif
