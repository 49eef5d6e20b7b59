"""Compare every `mean ± se` printed by the lessons between a git revision and a checkout (default: this one), cell by
cell: z = |new - old| / sqrt(se_old² + se_new²). Prints the pairs with z > 2 (moved) and a count of the others."""
import json, subprocess, sys, re, glob, os
REV = sys.argv[1]
root = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PM = re.compile(r'(-?\d+\.\d+)\s*±\s*(\d+\.\d+)')
def texts(cell):
    out = []
    for o in cell.get('outputs', []):
        if o.get('output_type') == 'stream': out.append(''.join(o.get('text', '')))
        elif 'data' in o: out.append(''.join(o['data'].get('text/plain', '')))
    return '\n'.join(out)
total = moved = 0
for path in sorted(glob.glob(f'{root}/nbs/*.ipynb')):
    rel = os.path.relpath(path, root)
    try: old = json.loads(subprocess.run(['git', '-C', root, 'show', f'{REV}:{rel}'], capture_output=True, text=True,
                                         check=True).stdout)
    except subprocess.CalledProcessError: continue
    new = json.load(open(path)); oc = {c['id']: c for c in old['cells'] if c['cell_type'] == 'code'}
    for c in new['cells']:
        if c['cell_type'] != 'code' or c['id'] not in oc: continue
        a, b = texts(oc[c['id']]).splitlines(), texts(c).splitlines()
        if a == b: continue
        label = lambda l: PM.sub('#', l).split('#')[0].strip()
        olds = {}
        for l in a:
            if PM.search(l): olds.setdefault(label(l), []).append(PM.findall(l))
        for l in b:
            if not PM.search(l) or not olds.get(label(l)): continue
            for (m1, s1), (m2, s2) in zip(olds[label(l)].pop(0), PM.findall(l)):
                se = (float(s1) ** 2 + float(s2) ** 2) ** 0.5
                z = abs(float(m2) - float(m1)) / se if se else (0 if m1 == m2 else float('inf'))
                total += 1
                if z > 2: moved += 1; print(f"MOVED {rel} [{label(l)[:60]}] {m1}±{s1} -> {m2}±{s2} z={z:.1f}")
print(f"{total} mean±se pairs compared, {moved} moved by more than 2 combined SE")
