"""Bad-input registry of contrastive_nb.cli (read by tests/test_bad_input.py once 'cli' is in its MODULES)."""
import tempfile
from pathlib import Path

from test_bad_input import Case, _mod
from bad_input_training import SETTINGS

def cases():
    cli, t = _mod('cli'), _mod('training')
    run = Path(tempfile.mkdtemp(prefix='bad_input_cli_'))
    t.train(t.TrainConfig(**SETTINGS), run)
    config = run / 'config.toml'
    return {
        'option_help': [Case(cli.option_help, {})],
        'build_parser': [Case(cli.build_parser, {})],
        'read_config_file': [Case(cli.read_config_file, dict(path=str(config)), os_errors=True)],
        'main': [Case(lambda run_dir: cli.main(['evaluate', run_dir, '--device', 'cpu']), dict(run_dir=str(run)),
                      aliases={'run_dir': ('argv',)})],
    }
