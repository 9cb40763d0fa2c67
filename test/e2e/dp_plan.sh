# Sourced by the data-parallel e2e tests (layouts.sh, reshard.sh): one generator of the
# tiny-GPT plans they compare, so that every layout differs from the others only in what
# the arguments say. Needs WORK (the test's directory, holding data/train.bin) and PLANC.
#
#   dp_plan NAME DEVICES MICRO ZERO [STEPS [PRECISION [RECOMPUTE [TENSOR [SEQUENCE [STAGES [SCHEDULE]]]]]]]
#     writes NAME.plan (mesh [dp: DEVICES], batch 8, seq 32; with TENSOR > 1, mesh
#     [dp: DEVICES, tp: TENSOR] and tensor = tp, with SEQUENCE = true also sequence
#     parallelism; with STAGES > 1, a pipeline axis pp of that size first, run with
#     SCHEDULE, gpipe or 1f1b) and builds exe_NAME (for --target $TARGET when TARGET is set;
#     with BUCKET set, e.g. "16 KiB", DDP gradient buckets of that size; with OFFLOAD set,
#     e.g. 'nvme("DIR")', the optimizer's moments offloaded there, and with OFFLOAD_PARAMS
#     set as well the ZeRO-3 parameter shard where it says; with LAYERS set, tiny's
#     shape with that many layers; with KEEP set, the pipeline's `keep:`, inputs or
#     activations; with VIRTUAL set, that many stages a pipeline rank: stages
#     STAGES × VIRTUAL, for the interleaved schedule).
dp_plan() {
  local t=${8:-1} p=${10:-1} axes="dp: $2" tensor="" pipeline=""
  if [[ $t -gt 1 ]]; then axes="dp: $2, tp: $t"; tensor="tensor = tp  sequence = ${9:-false}"; fi
  if [[ $p -gt 1 ]]; then axes="pp: $p, $axes"; pipeline="pipeline = pp(stages: $(( p * ${VIRTUAL:-1} )), schedule: ${11:-1f1b}${KEEP:+, keep: $KEEP})"; fi
  cat > "$1.plan" <<EOF
import "models/gpt.plan"
${LAYERS:+model tiny$LAYERS = gpt(vocab: 256, context: 64, layers: $LAYERS, heads: 4, width: 64)}
mesh m$2 {
  devices = cpu($(( $2 * t * p )))
  axes    = [$axes]
}
train $1 {
  model     = tiny${LAYERS:-}
  mesh      = m$2
  data      = tokens("$WORK/data/train.bin")
  batch     = 8
  micro     = $3
  seq       = 32
  parallel { data = dp  zero = $4  $tensor  $pipeline  ${BUCKET:+bucket = $BUCKET}  ${OFFLOAD:+offload { optimizer = $OFFLOAD ${OFFLOAD_PARAMS:+params = $OFFLOAD_PARAMS} \}} }
  precision = ${6:-fp32}
  recompute = ${7:-none}
  optimizer = adamw(lr: 2e-3, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0.1)
  schedule  = cosine(warmup: 4, min_lr: 1e-4)
  clip      = 1.0
  steps     = ${5:-20}
  seed      = 11
}
EOF
  "$PLANC" build "$1.plan" -o "exe_$1" ${TARGET:+--target "$TARGET"} ${HOST_ORDER:+--cuda-host-order "$HOST_ORDER"}
}

# run_layout NAME DEVICES MICRO ZERO [PRECISION [RECOMPUTE [TENSOR [SEQUENCE [STAGES [SCHEDULE]]]]]]:
# dp_plan's plan over 20 steps (SCHEDULE defaults to DEFAULT_SCHEDULE, else 1f1b), its
# `planc explain --json` in NAME.explain.json, and a run on DEVICES × TENSOR × STAGES ranks
# logging to NAME.jsonl (the layouts compare_layouts.py compares). Needs MPIRUN too.
run_layout() {
  dp_plan "$1" "$2" "$3" "$4" 20 "${5:-fp32}" "${6:-none}" "${7:-1}" "${8:-false}" "${9:-1}" \
    "${10:-${DEFAULT_SCHEDULE:-1f1b}}"
  "$PLANC" explain "$1.plan" --json > "$1.explain.json"
  local ranks=$(( $2 * ${7:-1} * ${9:-1} ))
  if [[ $ranks -eq 1 ]]; then
    "./exe_$1" --log "$1.jsonl" --quiet
  else
    "$MPIRUN" -n "$ranks" "./exe_$1" --log "$1.jsonl" --quiet
  fi
}
