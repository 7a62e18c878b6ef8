"""Replays ggml-alloc over the graphs llama.cpp's scheduler built, as
`dump.sh` records them, and prints each buffer's size: what
`sched_reserve: ... compute buffer size` prints, to the byte for a device
buffer, so the replay shows where a buffer's size comes from.

    python3 replay.py DUMP              # sizes per buffer id, max over graphs,
                                        # and the peak of live tensors
    EACH=1 python3 replay.py DUMP       # ... per graph
    TRACE=N TBID=B python3 replay.py DUMP   # graph N's allocations in buffer B

Buffer ids are the scheduler's backend order (e.g. 0 = Vulkan0, 1 = the CPU
with its pinned host buffer). A port of `ggml_gallocr_alloc_graph_impl`
(children and views counted, inputs first, in-place reuse of a parent with
one child left, frees when the last child ran) and of `ggml_dyn_tallocr`
(best fit among a chunk's holes, the later of equals; the open end that
wastes or grows least; merges on free; chunks of at most the buffer type's
maximum size). ALIGN0/ALIGN1 set a buffer's alignment; the Vulkan buffers
and Vulkan_Host are chunked at 1 GiB (`GGML_VK_SUBALLOCATION_BLOCK_SIZE`).
`planner/src/memory/galloc.rs` replays the same allocator over sequences
read from these traces."""
import sys, os
INPUT, OUTPUT = 1, 2
TR = False
TBID = int(os.environ.get('TBID', '0'))
ALIGN = {0: int(os.environ.get('ALIGN0', '16')), 1: int(os.environ.get('ALIGN1', '64')), 2: 64, 3: 64}
MAXCHUNK = {0: 1 << 30, 1: 1 << 30}
CAN_INPLACE = {'FILL','SCALE','DIAG_MASK_ZERO','DIAG_MASK_INF','ADD','ADD_ID','ADD1','SUB','MUL','DIV','SQR','SQRT','LOG','UNARY','ROPE','ROPE_BACK','SILU_BACK','RMS_NORM','RMS_NORM_BACK','CLAMP','SOFT_MAX','SOFT_MAX_BACK'}
def al(x, a): return (x + a - 1) // a * a

class Chunk:
    def __init__(self, size): self.free = [[0, size]]; self.max = 0
class Dyn:
    def __init__(self, bid):
        self.a = ALIGN.get(bid, 64); self.maxchunk = MAXCHUNK.get(bid, 1 << 62); self.chunks = []
    def new_chunk(self, minsize):
        self.chunks.append(Chunk(max(minsize, self.maxchunk))); return len(self.chunks) - 1
    def alloc(self, size):
        size = al(size, self.a)
        bc = bb = -1
        for c, ch in enumerate(self.chunks):
            bfs = 1 << 64
            for i in range(len(ch.free) - 1):
                s = ch.free[i][1]
                if s >= size and s <= bfs: bc, bb, bfs = c, i, s
        if bb == -1:
            best_reuse = -(1 << 63)
            for c, ch in enumerate(self.chunks):
                if ch.free:
                    o, s = ch.free[-1]
                    reuse = ch.max - o - size
                    better_reuse = best_reuse < 0 and reuse > best_reuse
                    better_fit = reuse >= 0 and reuse < best_reuse
                    if s >= size and (better_reuse or better_fit):
                        bc, bb, best_reuse = c, len(ch.free) - 1, reuse
        if bb == -1:
            bc = self.new_chunk(size); bb = 0
        ch = self.chunks[bc]; blk = ch.free[bb]
        addr = (bc, blk[0]); blk[0] += size; blk[1] -= size
        if blk[1] == 0: ch.free.pop(bb)
        ch.max = max(ch.max, addr[1] + size)
        return addr
    def free_bytes(self, addr, size):
        size = al(size, self.a); ch = self.chunks[addr[0]]; o = addr[1]; fb = ch.free
        for i in range(len(fb)):
            b = fb[i]
            if b[0] + b[1] == o:
                b[1] += size
                if i < len(fb) - 1 and b[0] + b[1] == fb[i + 1][0]:
                    b[1] += fb[i + 1][1]; fb.pop(i + 1)
                return
            if o + size == b[0]:
                b[0] = o; b[1] += size
                if i > 0 and fb[i - 1][0] + fb[i - 1][1] == b[0]:
                    fb[i - 1][1] += b[1]; fb.pop(i)
                return
        k = 0
        while k < len(fb) and fb[k][0] < o: k += 1
        fb.insert(k, [o, size])
    def size(self): return sum(c.max for c in self.chunks)

class T: pass
def parse(lines):
    graphs = []; cur = None
    for l in lines:
        if not l.startswith('GDUMP'): continue
        if l.startswith('GDUMP END'):
            graphs.append(cur); cur = None; continue
        if cur is None: cur = {'leafs': [], 'nodes': [], 'info': {}}
        name = l[l.index('|') + 1:l.rindex('|')]
        f = l[:l.index('|')].split()
        t = T(); t.name = name
        if f[1] == 'L':
            _, _, i, ptr, op, nb, be, vs, fl = f[:9]
            t.ptr, t.op, t.nbytes, t.be, t.vs, t.flags = ptr, op, int(nb), int(be), vs, int(fl)
            t.srcs = []; t.data = True; t.layout = None; t.voff = 0
            cur['leafs'].append(t)
        else:
            ptr, op, nb, be, vs, fl, ty, ne, nbs = f[3:12]
            srcs = f[12:22]
            rest = f[22:]
            t.ptr, t.op, t.nbytes, t.be, t.vs, t.flags = ptr, op, int(nb), int(be), vs, int(fl)
            t.layout = (ty, ne, nbs)
            t.srcs = [s for s in srcs]
            kv = dict(x.split('=') for x in rest)
            t.data = kv['buf'] == '1' or kv['data'] == '1'; t.voff = int(kv['voff'])
            cur['nodes'].append(t)
        cur['info'][t.ptr] = t
    return graphs

LIVE = {}; PEAK = {}  # bytes of live tensors per buffer, and their peak
def run(g):
    LIVE.clear()
    info = g['info']
    hn = {}
    def H(p):
        if p not in hn: hn[p] = {'nc': 0, 'nv': 0, 'alloc': False, 'bid': -1, 'addr': None}
        return hn[p]
    allocs = {}
    def is_view(t): return t.vs != '(nil)' and t.vs != '0x0'
    def T_(p): return info.get(p)
    def is_allocated(t): return t.data or H(t.ptr)['alloc']
    def alloc_node(t, bid):
        h = H(t.ptr)
        if is_allocated(t) or is_view(t): return
        h['alloc'] = True
        if t.op in CAN_INPLACE:
            for sp in t.srcs:
                if sp == '(nil)': continue
                p = T_(sp)
                if p is None: continue
                ph = H(sp)
                if not ph['alloc']: continue
                if p.flags & OUTPUT or (is_view(p) and T_(p.vs) is not None and T_(p.vs).flags & OUTPUT): continue
                if p.layout is None or p.layout != t.layout: continue
                if ph['nc'] == 1 and ph['nv'] == 0:
                    if is_view(p):
                        vs = T_(p.vs); vh = H(p.vs)
                        if vs is not None and vh['nv'] == 1 and vh['nc'] == 0 and p.voff == 0 and vh['alloc']:
                            h['bid'] = ph['bid']; h['addr'] = ph['addr']; ph['alloc'] = False; vh['alloc'] = False
                            extra(t, vs)
                            if TR and h['bid']==TBID: print(f'  inplace {t.name} [{t.op}] over {vs.name} (view {p.name})')
                            return
                    else:
                        h['bid'] = ph['bid']; h['addr'] = ph['addr']; ph['alloc'] = False
                        extra(t, p)
                        if TR and h['bid']==TBID: print(f'  inplace {t.name} [{t.op}] over {p.name}')
                        return
        if bid not in allocs: allocs[bid] = Dyn(bid)
        h['bid'] = bid; h['addr'] = allocs[bid].alloc(t.nbytes)
        LIVE[bid] = LIVE.get(bid, 0) + t.nbytes; PEAK[bid] = max(PEAK.get(bid, 0), LIVE[bid])
        if TR and bid==TBID: print(f'  alloc {t.name} [{t.op}] {t.nbytes} @{h["addr"][1]} max={allocs[bid].size()}')
    def extra(t, p):
        h = H(t.ptr); ph = H(p.ptr); A = allocs[ph['bid']]
        ps, ns = al(p.nbytes, A.a), al(t.nbytes, A.a)
        if ps > ns: A.free_bytes((h['addr'][0], h['addr'][1] + ns), ps - ns)
    def free_node(t):
        if t.flags & OUTPUT: return
        h = H(t.ptr); allocs[h['bid']].free_bytes(h['addr'], t.nbytes); h['alloc'] = False
        LIVE[h['bid']] -= t.nbytes
        if TR and h['bid']==TBID: print(f'  free {t.name} {t.nbytes}')
    for i, t in enumerate(g['leafs']):
        alloc_node(t, t.be)
    for t in g['nodes']:
        if is_view(t) and t.op != 'NONE': H(t.vs)['nv'] += 1
        if t.flags & INPUT: alloc_node(t, t.be)
        for sp in t.srcs:
            if sp == '(nil)': continue
            H(sp)['nc'] += 1
            s = T_(sp)
            if s is not None and s.flags & INPUT: alloc_node(s, t.be)
    for t in g['nodes']:
        for sp in t.srcs:
            if sp == '(nil)': continue
            s = T_(sp)
            if s is not None: alloc_node(s, t.be)
        alloc_node(t, t.be)
        for sp in t.srcs:
            if sp == '(nil)': continue
            ph = H(sp); ph['nc'] -= 1
            p = T_(sp)
            if ph['nc'] == 0 and ph['nv'] == 0:
                if p is not None and is_view(p):
                    vh = H(p.vs); vh['nv'] -= 1
                    vs = T_(p.vs)
                    if vh['nv'] == 0 and vh['nc'] == 0 and vh['alloc'] and vs is not None: free_node(vs)
                elif ph['alloc'] and p is not None:
                    free_node(p)
    return {b: a.size() for b, a in allocs.items()}

lines = open(sys.argv[1], errors='replace').read().split('\n')
gs = parse(lines)
best = {}
for k, g in enumerate(gs):
    TR = os.environ.get('TRACE') == str(k)
    r = run(g)
    for b, s in r.items(): best[b] = max(best.get(b, 0), s)
    if os.environ.get('EACH'): print(k, {b: round(s / 2**20, 2) for b, s in r.items()})
print('peak of live tensors (MiB)', {b: round(v / 2**20, 2) for b, v in sorted(PEAK.items())})
print('replayed', {b: round(s / 2**20, 2) for b, s in sorted(best.items())}, 'graphs', len(gs))
