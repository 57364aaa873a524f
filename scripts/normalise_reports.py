import json, re, sys, os
"""Normalise a directory of nandlab outputs in place for comparison
(scripts/compare_reports.sh): drop what depends on the machine (time,
throughput, memory) from JSON reports and printed summaries."""
BAD = re.compile(r'(gbps|rss|per_s|_per_cpu|seconds|wall|cpu|elapsed|throughput|_rate|requests_per|ops_per|speed|host_slower)', re.I)
def clean(v):
    if isinstance(v, dict): return {k: clean(x) for k, x in v.items() if not BAD.search(k)}
    if isinstance(v, list): return [clean(x) for x in v]
    return v
d = sys.argv[1]
for f in sorted(os.listdir(d)):
    p = os.path.join(d, f)
    if f.endswith('.json'):
        try: j = json.load(open(p))
        except Exception as e: continue
        json.dump(clean(j), open(p, 'w'), indent=1, sort_keys=True)
    elif f.endswith('.out'):
        lines = [l for l in open(p) if not re.search(r'^\s*(speed|time)\b|requests/s|GB/s|CPU|wall|peak RSS|seed \d+ drawn', l)]
        open(p, 'w').writelines(lines)
