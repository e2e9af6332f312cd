import heapq
def greedy(L, P, order):
    h = [(0.0, p) for p in range(P)]
    for t in order:
        l, p = heapq.heappop(h); heapq.heappush(h, (l + L[t], p))
    return max(l for l, _ in h)
P=132
def run(S,R,BN,BH,label):
    nq=(S+R-1)//R
    def cost(pm):
        last=min(S-1, R*pm+R-1); nb=last//BN+1; first=(R*pm)//BN; part=nb-first
        return (nb-part)+2*part+2.5
    L=[cost(nq-1-x) for bh in range(BH) for x in range(nq)]
    avg=sum(L)/P
    out=[f"{label} heads-major {greedy(L,P,range(len(L)))/avg:.4f}"]
    for g in [32,16,8,4,2]:
        if BH%g: continue
        order=[h*nq+x for g0 in range(0,BH,g) for x in range(nq) for h in range(g0,g0+g)]
        out.append(f"g{g} {greedy(L,P,order)/avg:.4f}")
    print(" ".join(out))
run(8192,192,128,64,"D64 causal S8192 B2H32")
run(8192,128,128,32,"D128 causal S8192 B2H16")
run(2048,128,128,128,"D128 causal S2048 B8H16")
run(32768,128,128,16,"D128 causal S32768 B1H16")
