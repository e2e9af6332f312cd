#!/usr/bin/env python3
# Session 19: a list-scheduling model of the forward's tiles (no GPU): how much longer than the
# average program's work the slowest program runs (the makespan over the mean), for the hardware's
# CTA scheduler (greedy in launch order), the persistent pass's static snake, and orders a host
# could compute from the block mask (round LPT, sorted boustrophedon, LPT). A tile costs its kv blocks, partial
# ones twice (session 16's timeline), plus 2.5 blocks of per-tile overhead; 132 programs.
import heapq, sys

def lengths(S, BH, mask):
    nq, L = S // 128, []
    for y in range(BH):
        for x in range(nq):
            pm = nq - 1 - x  # flash_fwd runs the last q tile first
            n, part = {'causal': (pm + 1, 1), 'none': (nq, 0), 'sw': (min(pm + 1, 9), 2 if pm >= 8 else 1)}[mask]
            L.append(n - part + 2 * part + 2.5)
    return L

def greedy(L, P, order):
    h = [(0.0, p) for p in range(P)]
    for t in order:
        l, p = heapq.heappop(h); heapq.heappush(h, (l + L[t], p))
    return max(l for l, _ in h)

def snake(L, P):  # passes/persistent.go
    n, load = len(L), [0.0] * P
    for s in range(n):
        r, t = s // P, s
        if r % 2 == 1 and (r + 1) * P <= n:
            t = (2 * r + 1) * P - 1 - s
        load[s % P] += L[t]
    return max(load)

def sorted_snake(L, P):
    load = [0.0] * P
    for s, t in enumerate(sorted(range(len(L)), key=lambda t: -L[t])):
        r = s // P
        load[s % P if r % 2 == 0 else P - 1 - s % P] += L[t]
    return max(load)

def round_lpt(L, P):  # launch order kept round by round; in each, longest tile to least loaded
    load = [0.0] * P
    for r in range(0, len(L), P):
        tiles = sorted(range(r, min(r + P, len(L))), key=lambda t: -L[t])
        for t, p in zip(tiles, sorted(range(P), key=lambda p: load[p])):
            load[p] += L[t]
    return max(load)

P = 132
for S, BH in [(8192, 32), (2048, 128), (32768, 16)]:
    for m in ['none', 'causal', 'sw']:
        L = lengths(S, BH, m); avg = sum(L) / P
        print(f"S={S:5d} B*H={BH:3d} {m:6s}  hardware {greedy(L, P, range(len(L))) / avg:.3f}  snake {snake(L, P) / avg:.3f}"
              f"  round LPT {round_lpt(L, P) / avg:.3f}  sorted snake {sorted_snake(L, P) / avg:.3f}  LPT {greedy(L, P, sorted(range(len(L)), key=lambda t: -L[t])) / avg:.3f}")
