#!/usr/bin/env bash
# Does pretraining with our recipe beat random initialisation?
#
#   CASES=clinical_cases.jsonl NER=pharmaconer WORK=runs/pvr TRAIN_SECONDS=1200 bash benchmarks/pretraining_vs_random_init.sh
#
# On one GPU: clean all the clinical cases (200 held out), learn a byte-level BPE, binarize, pretrain a
# 6 x 512 RoBERTa (document_mlm, 128 tokens, 256 sequences per update, peak LR 1e-3, 4% warm-up, linear decay
# to zero) for TRAIN_SECONDS of training, keep the checkpoint with the lowest validation perplexity, check it
# against word frequencies, convert it, and fine-tune it and its random-init twin on PharmaCoNER (NER_LR, 3
# seeds, NER_EPOCHS, all six runs at once on the one GPU). The number of updates is set from the speed of the
# first 300, so that the learning rate reaches zero when the time is up. Every stage is skipped when its
# output exists, so running it again resumes. Commands run with PYTHON (python3) and fairseq-train on PATH.
[ -n "${BASH_VERSION:-}" ] || { echo "pretraining_vs_random_init.sh: error: a bash script; run it with bash: bash $0" >&2; exit 1; }
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
: "${CASES:?CASES=clinical_cases.jsonl}" "${NER:?NER=pharmaconer folder with train valid test}" "${WORK:?WORK=output folder}"
TRAIN_SECONDS=${TRAIN_SECONDS:-1200} BATCH=${BATCH:-256} VOCAB_SIZE=${VOCAB_SIZE:-8000} NER_LR=${NER_LR:-2e-4} NER_EPOCHS=${NER_EPOCHS:-10}
mkdir -p "$WORK"
log() { echo "[$(date +%T)] $*" >&2; }
run() { log "+ $*"; "$@"; }

[[ -f $WORK/clean/stats.json ]] || run "$PYTHON" "$REPO/preprocess/clean_corpus.py" --source "clinical=$CASES" \
    --output-dir "$WORK/clean" --lang es --valid-docs 200 --workers "$(nproc)" --quiet
[[ -d $WORK/vocab ]] || run "$PYTHON" "$REPO/preprocess/train_vocab.py" --input "$WORK/clean/train.txt" --type bytelevel-bpe \
    --vocab-size "$VOCAB_SIZE" --output-dir "$WORK/vocab" --workers "$(nproc)"
[[ -d $WORK/data-bin ]] || PYTHON=$PYTHON run bash "$REPO/preprocess/binarize.sh" "$WORK/clean" "$WORK/vocab" "$WORK/data-bin" "$(nproc)"

mapfile -t BPE < <("$PYTHON" -m biofairseq.bpe_flags "$WORK/data-bin")
TRAIN=(fairseq-train "$WORK/data-bin" --user-dir "$REPO/biofairseq" --task document_mlm --criterion masked_lm_accuracy
    --arch bio_roberta_base --encoder-layers 6 --encoder-embed-dim 512 --encoder-ffn-embed-dim 2048 --encoder-attention-heads 8
    --dropout 0.1 --attention-dropout 0.1 --tokens-per-sample 128 --batch-size "$BATCH"
    --optimizer adam --adam-betas "(0.9,0.98)" --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 1.0
    --lr 1e-3 --lr-scheduler polynomial_decay ${HARDWARE:---fp16} --num-workers 4 --seed 1
    --save-dir "$WORK/pretrain/checkpoints" --save-interval-updates 500 --validate-interval-updates 500 --keep-interval-updates 1
    --save-interval 100000 --validate-interval 100000
    --no-epoch-checkpoints --best-checkpoint-metric ppl --log-format json --log-interval 50 --log-file "$WORK/pretrain/train.log"
    "${BPE[@]}")
mkdir -p "$WORK/pretrain"
if [[ ! -f $WORK/pretrain/finished ]]; then
    if [[ ! -f $WORK/pretrain/max_update ]]; then
        # 300 updates to measure the speed: still inside the warm-up, which does not depend on the total
        started=$SECONDS
        run "${TRAIN[@]}" --max-update 300 --total-num-update 1000000 --warmup-updates 1000000 --disable-validation
        "$PYTHON" - "$WORK/pretrain/train.log" "$TRAIN_SECONDS" "$((SECONDS - started))" >"$WORK/pretrain/max_update" <<'EOF'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"num_updates"' in l and '"wall"' in l]
(a, b) = steps[1], steps[-1]
rate = (int(b["num_updates"]) - int(a["num_updates"])) / (float(b["wall"]) - float(a["wall"]))
print(max(600, 300 + int(rate * (float(sys.argv[2]) - float(sys.argv[3])))))
EOF
        log "$(cat "$WORK/pretrain/max_update") updates in all"
    fi
    MAX=$(cat "$WORK/pretrain/max_update")
    run "${TRAIN[@]}" --max-update "$MAX" --total-num-update "$MAX" --warmup-updates $((MAX / 25))
    date -Is >"$WORK/pretrain/finished"
fi
[[ -f $WORK/pretrain/best.json ]] || run "$PYTHON" -m biofairseq.recipe.best_checkpoint "$WORK/pretrain/checkpoints" \
    "$WORK/pretrain/train.log" --output "$WORK/pretrain/best.json"
[[ -f $WORK/pretrain/check.json ]] || run "$PYTHON" -m biofairseq.recipe.pretraining_check "$WORK/pretrain/best.json" \
    "$WORK/data-bin" --output "$WORK/pretrain/check.json" --go-on
[[ -d $WORK/hf/pretrained ]] || run "$PYTHON" -m biofairseq.convert.cli to-hf "$WORK/pretrain/checkpoints/checkpoint_best.pt" "$WORK/hf/pretrained"
[[ -d $WORK/hf/random_init ]] || run "$PYTHON" -m biofairseq.recipe.random_init "$WORK/hf/pretrained" "$WORK/hf/random_init"

pids=()
for model in pretrained random_init; do
    for seed in 1 2 3; do
        out=$WORK/ner/model=$model/lr=$NER_LR/seed=$seed
        [[ -f $out/metrics.json ]] && continue
        mkdir -p "$out"
        "$PYTHON" -m biofairseq.finetune.cli train --model "$WORK/hf/$model" --train "$NER/train" --dev "$NER/valid" \
            --test "$NER/test" --output-dir "$out" --lr "$NER_LR" --seed "$seed" --epochs "$NER_EPOCHS" --max-length 128 \
            --batch-size 32 --gradient-accumulation 1 --warmup-ratio 0.1 --no-save-model >"$out.log" 2>&1 &
        pids+=($!)
    done
done
for pid in "${pids[@]}"; do wait "$pid"; done
run "$PYTHON" -m biofairseq.finetune.cli report "$WORK/ner/model=pretrained" "$WORK/ner/model=random_init" --output-dir "$WORK/ner"
log "done"
