#!/usr/bin/env bash
# test_hostile_explain.sh — `meshtrain explain` given hostile inputs, as a
# new user gives them (issue 21): `explain --model` checks the mesh and the
# layout exactly as `train` does, through the same code
# (mt_train_config_check), so the same mistakes exit 2 with train's
# messages; mesh specs that are malformed, zero, too large or overflowing
# exit 2 for --op too; a failing --json leaves no unterminated JSON on stdout
# (the harness checks that of every failure). The table's format is
# tests/hostile.sh's.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_explain.sh "$@"
hostile_fixtures

# a tiny GPT: its program is built in milliseconds
G="--model gpt --layers 2 --channels 16 --heads 2 --vocab 64 --batch 4 --seq 8"
OP="--op add 'f32[8]' 'f32[8]'"

hostile_cases <<EOF
# ---- the mesh: train's axes, sizes and products (silent and misleading before) ----
2 | mesh 'foo=2': axis 'foo' is unknown to the trainer | explain $G --mesh foo=2
2 | axis 'dta' is unknown to the trainer | explain --model mlp --mesh dta=2 --json
2 | the size of axis 'x' must be a positive integer | explain $G --mesh x=0
2 | the size of axis 'data' must be a positive integer | explain $G --mesh data=0
2 | the size of axis 'data' must be a positive integer | explain $G --mesh data=-3
2 | is too large; the limit is 1048576 devices per axis | explain $G --mesh data=99999999999999999999
2 | is too large; the limit is 1048576 devices per axis | explain $G --mesh data=9999999999999999999999999999999999999999
2 | 4295032832 devices; a mesh has at most 1048576 | explain --model mlp --mesh data=65536,tensor=65537
2 | leaves axis 'tensor' to the device count (-1), but none was given | explain --model mlp --mesh data=2,tensor=-1
2 | axis 'data' appears twice | explain --model mlp --mesh data=2,data=2
2 | axis 'data' has no size | explain --model mlp --mesh data
2 | ends with ',' | explain --model mlp --mesh data=2,
2 | has 2 devices but 3 were given | explain $G --devices 3 --mesh data=2
# ---- the mesh for --op: the same parser, the same exit ----
2 | the size of axis 'x' must be a positive integer | explain --mesh x=0 $OP
2 | is too large; the limit is 1048576 devices per axis | explain --mesh x=99999999999999999999 $OP
2 | 4295032832 devices | explain --mesh x=65536,y=65537 $OP
2 | leaves axis 'x' to the device count | explain --mesh x=-1 $OP
2 | axis 'x' has no size | explain --mesh x,y $OP
# ---- --op's operand types: the command line's mistakes, exit 2 naming the operand (exit 1 before) ----
2 | --op add: operand a: type 'f32[8': expected ',' or ']' after dim 0 | explain --mesh x=2,y=2 --op add 'f32[8' 'f32[8]'
2 | operand b: type 'f32[8,4': expected ',' or ']' after dim 1 | explain --mesh x=2,y=2 --op matmul 'f32[8,4]' 'f32[8,4'
2 | operand a: type 'f32[8': expected | explain --mesh x=2,y=2 --op add 'f32[8' 'f32[8]' --json
2 | operand a: type 'f32[0]': dim 0 has size 0 | explain --mesh x=2,y=2 --op add 'f32[0]' 'f32[8]'
2 | operand b: type 'f32[8,0]': dim 1 has size 0 | explain --mesh x=2,y=2 --op matmul 'f32[8,2]' 'f32[8,0]'
2 | operand a: type 'f32[-2]': expected the size of dim 0 | explain --mesh x=2,y=2 --op add 'f32[-2]' 'f32[8]'
2 | operand a: type 'f32[99999999999999999999]': dim 0 has size 99999999999999999999 | explain --mesh x=2,y=2 --op add 'f32[99999999999999999999]' 'f32[8]'
2 | operand a: type 'f32[8@x+x]': axis 'x' is used twice | explain --mesh x=2,y=2 --op add 'f32[8@x+x]' 'f32[8]'
2 | operand a: type 'f32[8@x,2@x]': axis 'x' is used twice | explain --mesh x=2,y=2 --op matmul 'f32[8@x,2@x]' 'f32[2,8]'
2 | operand b: type 'f32[8]{U:x+x}': axis 'x' is used twice | explain --mesh x=2,y=2 --op add 'f32[8]{U:x}' 'f32[8]{U:x+x}'
2 | operand a: type 'f32[8@z]': dim 0 names axis 'z', which the mesh 'x=2,y=2' does not have | explain --mesh x=2,y=2 --op add 'f32[8@z]' 'f32[8]'
2 | operand b: type 'f32[8]{U:w}' | explain --mesh x=2,y=2 --op add 'f32[8]' 'f32[8]{U:w}' --json
2 | operand a: type 'f64[8]': unknown dtype 'f64' | explain --mesh x=2,y=2 --op add 'f64[8]' 'f32[8]'
2 | operand b: type '': unknown dtype '' | explain --mesh x=2,y=2 --op add 'f32[8]' ''
2 | operand a: type 'f32[2,2,2,2,2,2,2,2,2]': more than | explain --mesh x=2,y=2 --op add 'f32[2,2,2,2,2,2,2,2,2]' 'f32[8]'
2 | operand a: type 'f32[7@x]': dim 0 of size 7 does not divide over x | explain --mesh x=2,y=2 --op add 'f32[7@x]' 'f32[7]'
# ---- --op's shapes that the op cannot take: exit 2 (1 before), the refusal object under --json ----
2 | matmul: a f32[8,2] · b f32[3,8]: the contracting dims differ (2 and 3) | explain --mesh x=2,y=2 --op matmul 'f32[8,2]' 'f32[3,8]'
2 | the contracting dims differ (4 and 8) | explain --mesh x=2,y=2 --op matmul 'f32[8,4@x]' 'f32[8,8]' --json | python3 -c 'import json; o = json.load(open("out.txt")); assert o["refused"] is True and o["status"] == "MT_ESHAPE"'
2 | b must be 2-D | explain --mesh x=2,y=2 --op matmul 'f32[8]' 'f32[9]'
2 | add: a f32[8] and b f32[9] do not broadcast | explain --mesh x=2,y=2 --op add 'f32[8]' 'f32[9]'
2 | do not broadcast | explain --mesh x=2,y=2 --op mul 'f32[8]' 'bf16[8]'
2 | a reshard only changes the layout | explain --mesh x=2,y=2 --op reshard 'f32[8,2]' 'f32[8,4]'
# ---- and a sharding --explicit refuses is the answer, not a mistake: still exit 1 ----
1 | both contracting dims are split over x | explain --mesh x=2,y=2 --op matmul 'f32[8,4@x]' 'f32[4@x,8]' --explicit
# ---- what the mesh asks of the rest, as train checks it ----
2 | batch B=8 (--batch) does not divide over the axes that split it | explain --model mlp --mesh data=1024
2 | pick B a multiple of 2 | explain $G --batch 3 --mesh data=2 --json
2 | pick B a multiple of 4 | explain $G --mesh data=2,fsdp=2 --batch 6
2 | zero=1 needs a mesh with a data axis | explain $G --zero 1
2 | zero=2 splits the parameters over the mesh's data axis, which 'tensor=2' does not have | explain $G --mesh tensor=2 --zero 2
2 | which 'data=1,tensor=2' gives only 1 device | explain $G --mesh data=1,tensor=2 --zero 3
2 | zero=1 with an fsdp axis | explain $G --mesh data=2,fsdp=2 --zero 1
2 | NH=2 heads (--heads) do not divide by 4 | explain $G --mesh tensor=4 --json
2 | Vp=65 does not divide by 2; pad it to 66 with --padded-vocab | explain $G --padded-vocab 65 --mesh tensor=2
2 | no tensor axis of 2 or more; add one (e.g. tensor=2) or drop --sequence-parallel | explain $G --mesh data=2 --sequence-parallel
2 | but there is no mesh | explain $G --sequence-parallel
2 | sequence parallelism splits T=8 (--seq) over tensor=3 | explain --model gpt --channels 24 --heads 3 --vocab 64 --batch 3 --seq 8 --mesh tensor=3 --sequence-parallel
2 | add --sequence-parallel (with a tensor axis), or drop --collective-matmul | explain $G --mesh tensor=2 --collective-matmul on
# ---- pipelines: the kind first, then its shape ----
2 | --schedule: unknown schedule kind 'zb-h3' | explain $G --mesh pipe=2 --schedule zb-h3
2 | unknown schedule kind 'zb-h3' | explain $G --mesh pipe=2 --schedule zb-h3 --microbatches 4
2 | needs at least 4 microbatches per step (m >= p), got 2; give --microbatches 4 | explain $G --mesh pipe=4 --microbatches 2
2 | cuts the model into 4 chunks, more than its L=2 blocks (--layers) | explain $G --mesh pipe=2 --schedule zb-v --microbatches 2
2 | divisible | explain $G --layers 4 --mesh pipe=2 --schedule interleaved --microbatches 3
2 | needs a model that can be cut into stages; mlp cannot | explain --model mlp --mesh pipe=2 --microbatches 2
2 | needs a mesh with a pipe axis | explain $G --schedule 1f1b
2 | has none of 2 or more devices | explain $G --mesh data=2 --schedule 1f1b
# ---- the model's own checks (exit 1 before) ----
2 | GPT channels C=16 are not divisible by the heads NH=3 | explain $G --heads 3
2 | padded vocabulary Vp=32 is smaller than the vocabulary V=64 | explain $G --padded-vocab 32
# ---- flags that change nothing here ----
2 | --remat recomputes the activations of transformer blocks, and --model mlp has none | explain --model mlp --remat full
2 | --model linreg has none | explain --model linreg --remat dots
2 | --grad-reduce bf16 sets the precision of gradient reductions between devices | explain $G --grad-reduce bf16
2 | --heads applies to --model gpt or --model llama only | explain --model mlp --heads 4
2 | --layers applies to --model gpt or --model mlp or --model llama only, not to --model linreg | explain --model linreg --layers 3
# ---- a failure past the checks leaves no half a program on stdout (--json: the refusal, as JSON) ----
1 | partial sums over tensor | explain $G --devices 4 --mesh data=2,tensor=2 --explicit --json | python3 -c 'import json; o = json.load(open("out.txt")); assert o["refused"] is True and o["mode"] == "explicit" and "partial sums" in o["message"]'
1 | partial sums over tensor | explain $G --devices 4 --mesh data=2,tensor=2 --explicit | test ! -s out.txt
# ---- and what is right still runs ----
0 | - | explain $G --mesh data=2,tensor=2 --json | python3 -c 'import json; json.load(open("out.txt"))'
0 | - | explain $G --layers 2 --mesh pipe=2 --microbatches 2 | grep -q '^communication per step: 0 collectives' out.txt
0 | - | explain --model mlp --devices 2 | grep -q '^device 1 (data=1): the same program' out.txt
EOF
test_end
