"""Bad-input registry of the processes tools page (contrastive_nb.launch): starting processes, and reading memory."""
import torch
from test_bad_input import Case, _mod

CONSTANTS = {'DEVICES'}

def cases() -> dict:
    l, d = _mod('launch'), _mod('distributed')
    def threads(n):
        with l.cpu_threads(n): return torch.get_num_threads()

    return {
        'world': [Case(l.world, {})],
        'select_device': [Case(l.select_device, dict(device='cpu'), choices=('device',))],
        'cpu_threads': [Case(threads, dict(n=1))],
        'free_port': [Case(l.free_port, {}, deterministic=False)],
        'launch': [Case(l.launch, dict(fn=l.run_calls, world_size=1, args=([],), kwargs=None, timeout=60.0,
                                       threads=1), fixed=('kwargs',))],
        'run_calls': [Case(l.run_calls, dict(calls=[(d.world, {})]))],
        'status_mib': [Case(l.status_mib, dict(field='VmRSS'), deterministic=False)],
        'reset_peak': [Case(l.reset_peak, {}, deterministic=False)],
        'peak_mib': [Case(l.peak_mib, {}, deterministic=False)],
        'Processes': [Case(lambda parameters, world_size: l.Processes(parameters, world_size).world_size,
                           dict(parameters=[torch.nn.Parameter(torch.ones(2))], world_size=2))],
    }
