"""Bad-input registry of the experiments tools page (contrastive_nb.experiments): paired intervals and claims."""
import json

from test_bad_input import Case, _mod, _tmp

CONSTANTS: set[str] = {'CLAIMS_MIME', 'SHARED_RUNS_VARIABLE'}

def _zero() -> int:
    "A named function of no arguments (run_fingerprint's valid call)."
    return 0

def _lessons():
    "A folder holding one lesson notebook whose marked output holds one claim."
    e, folder = _mod('experiments'), _tmp()
    claim = e.Claim('a claim', 'Someone 2020', '00', '0.40 ± 0.01', 'reproduced')
    cell = {'cell_type': 'code', 'source': 'show_claims(rows)', 'metadata': {},
            'outputs': [{'output_type': 'execute_result',
                         'data': e.show_claims([claim])._repr_mimebundle_()}]}
    (folder / '00_lesson.ipynb').write_text(json.dumps({'cells': [cell]}), encoding='utf-8')
    return folder

def cases() -> dict:
    e = _mod('experiments')
    claim = lambda: e.Claim('a claim', 'Someone 2020', '03', '0.40 ± 0.01', 'reproduced')
    folder = _lessons()
    return {
        'paired_difference': [Case(e.paired_difference, dict(a=[0.4, 0.37, 0.42], b=[0.21, 0.2, 0.22],
                                                             level=0.95))],
        'PairedDifference': [Case(e.PairedDifference, dict(mean=0.1, low=0.0, high=0.2, se=0.05, n=3,
                                                           level=0.95),
                                  fixed=('mean', 'low', 'high', 'se', 'n', 'level'))],
        'Claim': [Case(e.Claim, dict(claim='a claim', source='Someone 2020', lesson='03',
                                     measured='0.40 ± 0.01', verdict='reproduced'))],
        'claims_markdown': [Case(e.claims_markdown, dict(claims=[claim()]))],
        'show_claims': [Case(e.show_claims, dict(claims=[claim()]))],
        'ClaimsOutput': [Case(e.ClaimsOutput, dict(claims=[claim()]))],
        'read_claims': [Case(e.read_claims, dict(path=str(folder / '00_lesson.ipynb')), os_errors=True)],
        'read_course_claims': [Case(e.read_course_claims, dict(nbs=str(folder)), os_errors=True)],
        'map_runs': [Case(e.map_runs, dict(fn=abs, jobs=[(1,), (-2,)], processes=1, desc='runs',
                                           progress=False))],
        'shared_run': [Case(lambda a, b: e.shared_run(e.paired_difference, a, b),
                            dict(a=[0.4, 0.37, 0.42], b=[0.21, 0.2, 0.22]))],
        'run_fingerprint': [Case(e.run_fingerprint, dict(fn=_zero))],
    }
