#!/usr/bin/env bash
# The GPU checklist as one command: every step's log and figure under one output folder, a summary table at the end.
#
#   scripts/gpu_check.sh [OUT_DIR]                  # with a CUDA GPU (OUT_DIR: default $OUT, else ./gpu_check)
#   scripts/gpu_check.sh --dry [OUT_DIR]            # the same steps on the CPU at tiny sizes (GPU_CHECK_DRY=1 too)
#   scripts/gpu_check.sh --nanogpt PATH [OUT_DIR]   # nanoGPT's checkout (its train.py); default $NANOGPT_DIR, else
#                                                   # a nanoGPT/ folder beside this checkout; none: that step is skipped
#
# Steps, in order (each with its own time limit; a failed or timed-out step is logged and the next one runs):
#   smoke, smoke_bf16, smoke_fp16   the README's first command on the GPU, then bf16 and fp16 runs of 50 steps:
#                                   the loss from first to last step and every warning line
#   decoder_124m                    scripts/bench.py --preset gpt2-124m, bf16: lmpt and transformers, eager and
#                                   compiled: tokens/s, MFU against the datasheet peak, the ratios
#   nanogpt_124m                    nanoGPT's train.py, unmodified, at the same shapes on random tokens: tokens/s
#   encoder_128, encoder_512        scripts/bench.py --preset bert-110m (mlm) at sequence 128 and 512, against BERT
#   resume_deterministic, resume    a bf16 run killed with kill -9 and resumed against the same run uninterrupted:
#                                   bit for bit with trainer.deterministic=true; the largest loss difference without
#   torchrun_ddp, torchrun_fsdp     torchrun --nproc_per_node=1, DDP and FSDP2
# It finishes within 8 minutes: each step has its own time limit, cut to what is left of GPU_CHECK_BUDGET_S seconds
# (default 470; 1800 in the dry run, for a shared CPU), and a step with under 15 s left is skipped: the summary comes.
# OUT_DIR/summary.md holds the table; OUT_DIR/STEP/ each step's log.txt, run directories and result.json.
# GPU_CHECK_STEPS=smoke,resume runs only the steps it names (the others are listed as skipped).
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DRY=${GPU_CHECK_DRY:-0}
NANOGPT=${NANOGPT_DIR:-}
OUT_DIR=""
die() { echo "gpu_check.sh: error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --dry) DRY=1 ;;
    --nanogpt) [ $# -ge 2 ] || die "--nanogpt needs the path of nanoGPT's checkout"; NANOGPT=$2; shift ;;
    --nanogpt=*) NANOGPT=${1#--nanogpt=} ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1: give --dry, --nanogpt PATH or an output folder (see --help)" ;;
    *) [ -z "$OUT_DIR" ] || die "two output folders given ($OUT_DIR and $1): give one"; OUT_DIR=$1 ;;
  esac
  shift
done
OUT_DIR=${OUT_DIR:-${OUT:-gpu_check}}
if [ -d "$OUT_DIR" ] && [ -n "$(ls -A "$OUT_DIR")" ]; then
  die "$OUT_DIR is not empty: its runs would be resumed and its figures mixed; give a new or empty folder"
fi
PY=${PYTHON:-python}
if [ "$DRY" != 1 ]; then
  "$PY" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null \
    || die "no CUDA GPU is visible to torch: run scripts/gpu_check.sh --dry for the CPU dry run"
fi
mkdir -p "$OUT_DIR" || die "cannot create $OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
if [ -z "$NANOGPT" ] && [ -f "$REPO/../nanoGPT/train.py" ]; then NANOGPT=$(cd "$REPO/../nanoGPT" && pwd); fi

export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export LMPT_CACHE_DIR="$OUT_DIR/cache"  # tokenizers and token caches built once, by the first run, for every step
unset HYDRA_FULL_ERROR
HELPER=("$PY" "$REPO/scripts/gpu_check.py")
LMPT=("$PY" -m lmpt trainer.progress=plain)
TORCHRUN=("$PY" -m torch.distributed.run --standalone --nproc_per_node=1 -m lmpt trainer.progress=plain)
BUDGET_S=${GPU_CHECK_BUDGET_S:-$([ "$DRY" = 1 ] && echo 1800 || echo 470)}

if [ "$DRY" = 1 ]; then
  TINY=(tokenizer.vocab_size=1024 data.seq_len=64 trainer.batch_size=8 scheduler.warmup_steps=2 trainer.eval_batches=1
        trainer.sample_tokens=0 trainer.log_every=1)
  SMOKE=(trainer.device=cpu "${TINY[@]}" trainer.max_steps=6)
  SHORT=(trainer.device=cpu "${TINY[@]}" trainer.max_steps=3)
  BENCH=(--device cpu --preset cpu-small --precisions fp32 --repeats 1 --steps 1 --warmup 1 --batch 2)
  DECODER=(--objectives clm --systems lmpt,hf --seq-len 32)  # compiling on a CPU takes minutes: eager only
  ENCODER=(--objectives mlm --systems lmpt,hf)
  ENC_SHORT=(--seq-len 32); ENC_LONG=(--seq-len 64)
  NANO=(--device=cpu --dtype=float32 --compile=False --batch_size=2 --block_size=32 --n_layer=2 --n_head=2
        --n_embd=64 --max_iters=8)
  RESUME=(trainer.device=cpu "${TINY[@]}" model.d_model=32 model.n_layers=1 model.n_heads=2 model.ffn_dim=64
          trainer.max_steps=40 trainer.ckpt_every=4 trainer.keep_last=20)  # three runs: the smallest model
  KILL_AT=6
  TIMEOUT_RUN=120; TIMEOUT_BENCH=180; TIMEOUT_RESUME=240
  echo "CPU dry run: tiny sizes, figures meaningless" > "$OUT_DIR/device.txt"
else
  SMOKE=(trainer.device=cuda)  # the README's first command, on the GPU
  SHORT=(trainer.device=cuda trainer.max_steps=50 trainer.sample_tokens=0)
  BENCH=(--device cuda --precisions bf16 --repeats 2 --steps 10 --warmup 3)
  DECODER=(--preset gpt2-124m --objectives clm --systems lmpt-compiled,lmpt,hf,hf-compiled)
  ENCODER=(--preset bert-110m --objectives mlm --systems lmpt,hf)
  ENC_SHORT=(); ENC_LONG=(--seq-len 512 --batch 32)  # the preset's 128 x 128 tokens, then as 32 x 512
  NANO=(--device=cuda --dtype=bfloat16 --compile=True --batch_size=8 --block_size=1024 --n_layer=12 --n_head=12
        --n_embd=768 --max_iters=30)
  RESUME=(trainer.device=cuda model=small trainer.precision=bf16 trainer.max_steps=200 trainer.ckpt_every=50
          trainer.keep_last=5 trainer.sample_tokens=0)
  KILL_AT=100
  TIMEOUT_RUN=60; TIMEOUT_BENCH=150; TIMEOUT_RESUME=120
  "$PY" -c "import torch; print(torch.cuda.get_device_name(), 'torch', torch.__version__, 'CUDA', torch.version.cuda)" \
    > "$OUT_DIR/device.txt"
fi
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "$(date -u '+%Y-%m-%d %H:%M UTC'): scripts/gpu_check.sh$([ "$DRY" = 1 ] && echo ' --dry'), commit $COMMIT" \
  >> "$OUT_DIR/device.txt"
RESUME+=(trainer.log_every=1 trainer.eval_every=0)  # each step logged: the kill lands mid-run, compared step by step
STARTED=$(date +%s)

# step NAME KIND TIMEOUT_S COMMAND...: run COMMAND in OUT_DIR/NAME (log.txt there), then read its figure.
step() {
  local name=$1 kind=$2 limit=$3; shift 3
  local dir="$OUT_DIR/$name" began rc ms left
  mkdir -p "$dir"
  echo "$name" >> "$OUT_DIR/steps.txt"
  left=$(( BUDGET_S - ($(date +%s) - STARTED) ))
  if [ -n "${GPU_CHECK_STEPS:-}" ] && [[ ",$GPU_CHECK_STEPS," != *",$name,"* ]]; then
    echo "not asked for: GPU_CHECK_STEPS=$GPU_CHECK_STEPS" > "$dir/skipped"
  elif [ "$left" -lt 15 ]; then
    echo "out of time: under 15 s left of the check's $BUDGET_S s budget" > "$dir/skipped"
  elif [ "$left" -lt "$limit" ]; then
    limit=$left  # the whole check stays within its budget
  fi
  began=$(date +%s%N)
  if [ -e "$dir/skipped" ]; then
    rc=0
  else
    echo "== $name: $*" | cut -c1-200
    (cd "$dir" && printf '$ %s\n' "$*" > log.txt && timeout -k 10 "$limit" "$@" >> log.txt 2>&1)
    rc=$?
  fi
  ms=$(( ($(date +%s%N) - began) / 1000000 ))
  "${HELPER[@]}" figure "$kind" "$dir" --rc "$rc" --timeout "$limit" --seconds "$((ms / 1000)).$((ms % 1000 / 100))" \
    || echo "$name: no result (the helper failed)"
}

step smoke run "$TIMEOUT_RUN" "${LMPT[@]}" "${SMOKE[@]}" "hydra.run.dir=$OUT_DIR/smoke/run"
for precision in bf16 fp16; do
  step "smoke_$precision" run "$TIMEOUT_RUN" "${LMPT[@]}" "${SHORT[@]}" "trainer.precision=$precision" \
    "hydra.run.dir=$OUT_DIR/smoke_$precision/run"
done

BENCH_CACHE=(--cache-dir "$OUT_DIR/cache/bench")  # the benchmark's tokenizer trained once for every bench step
step decoder_124m bench "$TIMEOUT_BENCH" "$PY" "$REPO/scripts/bench.py" "${BENCH[@]}" "${BENCH_CACHE[@]}" \
  "${DECODER[@]}" --json "$OUT_DIR/decoder_124m/bench.json"

if [ -n "$NANOGPT" ] && [ -f "$NANOGPT/train.py" ]; then
  NANO_DIR="$OUT_DIR/nanogpt_124m"
  mkdir -p "$NANO_DIR/src"
  cp "$NANOGPT/train.py" "$NANOGPT/model.py" "$NANOGPT/configurator.py" "$NANO_DIR/src/"  # unmodified; its cwd
  "${HELPER[@]}" nanogpt-data "$NANO_DIR/src"
  step nanogpt_124m nanogpt "$TIMEOUT_BENCH" bash -c 'cd src && exec "$@"' nanogpt "$PY" train.py --dataset=gpu_check \
    --out_dir=out --eval_interval=100000 --eval_iters=1 --log_interval=1 --always_save_checkpoint=False \
    --wandb_log=False --gradient_accumulation_steps=1 --dropout=0.0 "${NANO[@]}"
else
  mkdir -p "$OUT_DIR/nanogpt_124m"
  echo "no nanoGPT checkout: give --nanogpt PATH (or NANOGPT_DIR, or put nanoGPT/ beside this checkout)" \
    > "$OUT_DIR/nanogpt_124m/skipped"
  step nanogpt_124m nanogpt "$TIMEOUT_BENCH" true
fi

step encoder_128 bench "$TIMEOUT_BENCH" "$PY" "$REPO/scripts/bench.py" "${BENCH[@]}" "${BENCH_CACHE[@]}" \
  "${ENCODER[@]}" ${ENC_SHORT[@]+"${ENC_SHORT[@]}"} --json "$OUT_DIR/encoder_128/bench.json"
step encoder_512 bench "$TIMEOUT_BENCH" "$PY" "$REPO/scripts/bench.py" "${BENCH[@]}" "${BENCH_CACHE[@]}" \
  "${ENCODER[@]}" "${ENC_LONG[@]}" --json "$OUT_DIR/encoder_512/bench.json"

step resume_deterministic resume "$TIMEOUT_RESUME" "${HELPER[@]}" resume "$OUT_DIR/resume_deterministic" \
  --kill-at "$KILL_AT" -- "${LMPT[@]}" "${RESUME[@]}" trainer.deterministic=true
step resume resume "$TIMEOUT_RESUME" "${HELPER[@]}" resume "$OUT_DIR/resume" --kill-at "$KILL_AT" -- \
  "${LMPT[@]}" "${RESUME[@]}"

step torchrun_ddp run "$TIMEOUT_RUN" "${TORCHRUN[@]}" "${SHORT[@]}" trainer.amp=true \
  "hydra.run.dir=$OUT_DIR/torchrun_ddp/run"
step torchrun_fsdp run "$TIMEOUT_RUN" "${TORCHRUN[@]}" "${SHORT[@]}" trainer.amp=true trainer.strategy=fsdp \
  optimizer=adamw "hydra.run.dir=$OUT_DIR/torchrun_fsdp/run"

echo "== summary ($(( $(date +%s) - STARTED )) s): $OUT_DIR/summary.md"
"${HELPER[@]}" summary "$OUT_DIR"
