"""The command line of a benchmark script, declared by its options' defaults."""
import argparse


def parse_args(doc, **options):
    """Parses --NAME (underscores as dashes) for each NAME=value, with the script's docstring `doc`
    as the help's description. value is the default, and the option takes its type; a dict is
    argparse's add_argument keywords instead (a switch, a help text, another type)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, dict):
            parser.add_argument(flag, **value)
        else:
            parser.add_argument(flag, type=type(value), default=value)
    return parser.parse_args()
