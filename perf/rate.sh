# rate.sh: sourced by the veth benchmarks (incast.sh, fairness.sh).
# rate_bps R: tc's rate units (500mbit, 2gbit, 800kbit, or bits) in bits per second.
rate_bps() {
	awk -v r="$1" 'BEGIN { m = 1; if (r ~ /gbit$/) m = 1e9; else if (r ~ /mbit$/) m = 1e6;
		else if (r ~ /kbit$/) m = 1e3; sub(/[a-z]+$/, "", r); print r * m }'
}
