/* The pipeline peers' shared driver (bench/peers/pipe_omp.c: options, planes and tile grids,
 * --tile best, --check, JSON) as a runner sees it: pipe_omp's OpenMP runner and pipe_tbb's flow
 * graph both run through these calls, so both peers time, check and report the same way. */
#ifndef TS_PIPE_PEER_DRIVER_H
#define TS_PIPE_PEER_DRIVER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_run pp_run;
/* A runner runs every frame of r and returns the seconds of its set-up inside the run (a graph
 * built, 0 when none): part of wall_s, reported apart. */
typedef double (*pp_runner)(pp_run *r);
/* Starts the runner's thread pool with `threads` workers (before anything is timed). */
typedef void (*pp_init)(int threads);

int pp_stages(const pp_run *r);
int pp_slots(const pp_run *r);
int pp_inflight(const pp_run *r);
int64_t pp_frames(const pp_run *r);
int64_t pp_tiles(const pp_run *r, int s);
int pp_tiles_x(const pp_run *r, int s);
int pp_inputs(const pp_run *r, int s);
/* Input i of stage s as read by tile t: the producer stage (*from; the last stage for a feedback
 * input) and its tiles [ax, bx] x [ay, by] (producer grid coordinates). Returns 1 for a feedback
 * input (the previous frame's last stage; nothing on frame 0), else 0. */
int pp_input_tiles(const pp_run *r, int s, int64_t t, int i, int *from, int *ax, int *bx, int *ay, int *by);
/* Runs the kernel of (frame f, stage s, tile t) on frame f's slot. */
void pp_exec(pp_run *r, int64_t f, int s, int64_t t);
/* Frame f's last stage is complete and its slot not yet reused: keeps it for --check. */
void pp_frame_done(pp_run *r, int64_t f);
/* The peers' main: argc/argv as above; peer, runtime and compiler name the peer in the JSON. */
int pp_main(int argc, char **argv, const char *peer, const char *runtime, const char *compiler, pp_init init,
            pp_runner run);

#ifdef __cplusplus
}
#endif
#endif
