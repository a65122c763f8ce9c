#!/usr/bin/env bash
# Regenerates tests/fuzz/corpus/fuzz_requests/: one valid request of each RPC,
# encoded by protoc from text format, behind fuzz_requests.cc's selector byte.
# Run after changing proto/horovodd.proto's requests.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
proto_dir="$repo_root/proto"
out="$repo_root/tests/fuzz/corpus/fuzz_requests"
mkdir -p "$out"

# encode SELECTOR FILE MESSAGE TEXT
encode() {
  { printf "\\x$(printf %02x "$1")"
    printf '%s' "$4" | protoc -I"$proto_dir" --encode="horovodd.v1.$3" "$proto_dir/horovodd.proto"
  } > "$out/$2"
}

who='who { job_id: "job-1" worker_id: 3 token: "abc" }'
encode 0 submit_job SubmitJobRequest 'spec { argv: "/bin/echo" argv: "hi" env { key: "A" value: "1" } num_proc: 2 min_np: 1 max_np: 4 discovery { hosts { host: "localhost" slots: 2 } interval_seconds: 1 script_timeout_seconds: 10 } elastic_timeout_seconds: 60 start_timeout_seconds: 60 liveness_timeout_seconds: 60 blacklist_cooldown_min_seconds: 1 blacklist_cooldown_max_seconds: 2 ssh { port: 22 user: "u" host_key_checking: "strict" } network_interface: "eth0" name: "n" elastic: true }'
encode 0 submit_script SubmitJobRequest 'spec { argv: "train" working_dir: "/tmp" num_proc: 1 min_np: 1 discovery { script: "/bin/discover" default_slots: 2 interval_seconds: 5 script_timeout_seconds: 5 } elastic_timeout_seconds: 60 start_timeout_seconds: 60 liveness_timeout_seconds: 60 }'
encode 1 get_job GetJobRequest 'job_id: "job-1"'
encode 2 list_jobs ListJobsRequest ''
encode 3 watch_job WatchJobRequest 'job_id: "job-7" from_seq: 3'
encode 4 cancel_job CancelJobRequest 'job_id: "job-1" reason: "done"'
encode 5 drain_host DrainHostRequest 'host: "node-1" job_id: "job-2"'
encode 6 worker_output GetWorkerOutputRequest 'job_id: "job-1" rank: 1 max_lines: 10'
encode 7 kv_set KvSetRequest "$who"' generation: 2 key: "g2/rank_0" value: "addr"'
encode 8 kv_get KvGetRequest "$who"' generation: 2 keys: "a" keys: "b" timeout_seconds: 30'
encode 9 attach_hello WorkerMessage 'hello { job_id: "job-1" worker_id: 3 token: "abc" }'
encode 9 attach_heartbeat WorkerMessage 'heartbeat { generation: 4 }'
encode 9 attach_rendezvous WorkerMessage 'rendezvous { id: 1 after_generation: 2 }'
encode 10 commit CommitReport "$who generation: 2 commit: 10"
encode 11 failure FailureReport "$who"' generation: 2 message: "ring broke"'
echo "wrote $(ls "$out" | wc -l) seeds to $out"
