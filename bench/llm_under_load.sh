#!/usr/bin/env bash
# Decode speed with the adaptive decode team on and off, on a quiet machine and with one other
# process busy on a core (a shell busy loop: the load a shared 2-core machine sees when a second
# job runs), the two settings interleaved run by run so that both see the same machine.
#
#   bench/llm_under_load.sh [TESSERA] [MODEL] [RUNS]   (defaults: build/tessera,
#                            bench/peers/.venv-llm/smollm2.gguf, 3)
# Prints per condition the median decode tok/s of each setting, their ratio, and the share of
# decode steps the adaptive team ran on one thread. Threads: all (tessera's default).
set -u
T=${1:-build/tessera}
M=${2:-bench/peers/.venv-llm/smollm2.gguf}
RUNS=${3:-3}
[ -x "$T" ] || { echo "no tessera binary at $T" >&2; exit 1; }
[ -f "$M" ] || { echo "no model at $M (scripts/get-smollm2.sh installs it)" >&2; exit 1; }
run() { # $1: on|off -> "tok/s solo_share"
  "$T" llm bench --model "$M" --prompt-len 128 --gen 64 --repeats 3 --bw-seconds 0 --adaptive-threads "$1" --json |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["decode_tps"], j["decode_solo_share"])'
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for cond in quiet loaded; do
  pid=
  if [ $cond = loaded ]; then
    sh -c 'while :; do :; done' &
    pid=$!
    sleep 1
  fi
  : >/tmp/llm_load_on.$$; : >/tmp/llm_load_off.$$; : >/tmp/llm_load_solo.$$
  for ((r = 0; r < RUNS; r++)); do
    read -r tps solo < <(run on); echo "$tps" >>/tmp/llm_load_on.$$; echo "$solo" >>/tmp/llm_load_solo.$$
    read -r tps _ < <(run off); echo "$tps" >>/tmp/llm_load_off.$$
  done
  [ -n "$pid" ] && kill "$pid"
  on=$(median </tmp/llm_load_on.$$); off=$(median </tmp/llm_load_off.$$); solo=$(median </tmp/llm_load_solo.$$)
  awk -v c=$cond -v on="$on" -v off="$off" -v s="$solo" 'BEGIN {
    printf "%-7s adaptive on %7.1f tok/s   off %7.1f tok/s   on/off %.2fx   steps on one thread %.0f%%\n", c, on, off, on / off, 100 * s }'
done
rm -f /tmp/llm_load_on.$$ /tmp/llm_load_off.$$ /tmp/llm_load_solo.$$
