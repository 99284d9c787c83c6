"""``reid serve``: the HTTP service; ``reid serve keys create|list|revoke|admin``: its keys."""

from __future__ import annotations

from pathlib import Path

import typer

from reid.cli.common import CommandTyper, console, handle_errors, print_table, printable
from reid.cli.defaults import given, with_default
from reid.errors import ConfigError
from reid.evaluation.names import timestamp
from reid.serve.config import ServeConfig, load_serve_config
from reid.serve.keys import SCOPES, KeyStore, new_admin_key

CONFIG_HELP = "serve.yaml: root, models, galleries (model, detect, detector, no_face, threshold, top_k, location), gallery_location, limits; options override it."

serve_app = CommandTyper(help="Serve galleries over HTTP (FastAPI + uvicorn); see docs/serve.md.", no_args_is_help=False)
keys_app = CommandTyper(help="Per-gallery API keys (stored hashed in the keys file).", no_args_is_help=True)
serve_app.add_typer(keys_app, name="keys")


def _models(specs: list[str] | None) -> dict[str, str] | None:
    """``--model NAME=PATH`` or ``--model PATH`` (named by its folder)."""
    if not specs:
        return None
    models = {}
    for spec in specs:
        name, _, path = spec.partition("=") if "=" in spec else (Path(spec).name, "", spec)
        models[name] = path
    return models


@serve_app.callback(invoke_without_command=True)
@handle_errors
def serve(
    ctx: typer.Context,
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
    host: str | None = typer.Option(None, "--host", help=with_default("Address to listen on.", ServeConfig.host)),
    port: int | None = typer.Option(None, "--port", help=with_default("Port to listen on.", str(ServeConfig.port))),
    workers: int | None = typer.Option(
        None, "--workers", help=with_default("uvicorn processes sharing the port.", str(ServeConfig.workers))
    ),
    threads: int | None = typer.Option(
        None, "--threads", help=with_default("Inference threads per process.", str(ServeConfig.threads))
    ),
    queue: int | None = typer.Option(
        None, "--queue", help=with_default("Requests that may wait for a thread before 503.", str(ServeConfig.queue))
    ),
    root: Path | None = typer.Option(
        None, "--root", help=with_default("Folder whose sub-folders are the galleries served.", str(ServeConfig.root))
    ),
    model: list[str] | None = typer.Option(None, "--model", "-m", help="A model to serve: NAME=FOLDER or FOLDER (repeatable)."),
    admin_key_file: Path | None = typer.Option(
        None, "--admin-key-file", help="File holding the admin key (else REID_SERVE_ADMIN_KEY; never the key itself here)."
    ),
    no_auth: bool = typer.Option(False, "--no-auth", help="Serve without keys; refused unless the host is loopback."),
    cors_origin: list[str] | None = typer.Option(None, "--cors-origin", help="Allow browser calls from this origin (repeatable; default: none)."),
) -> None:
    """Serve the galleries under the root over HTTP: search, verify, embed, enrol, manage."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        from reid.serve.run import serve as run_server
    except ImportError as exc:
        raise ConfigError(f"reid serve needs the serve extra ({exc.name} is missing): pip install 'reid-toolkit[serve]'") from None

    settings = load_serve_config(
        config,
        **given(
            host=host, port=port, workers=workers, threads=threads, queue=queue,
            root=None if root is None else str(root), models=_models(model), no_auth=no_auth or None,
            cors_origins=cors_origin or None,
        ),
    )  # fmt: skip
    run_server(settings, admin_key_file, announce=typer.echo)


def _settings(config: Path | None, root: Path | None, keys_file: Path | None) -> ServeConfig:
    return load_serve_config(
        config, **given(root=None if root is None else str(root), keys_file=None if keys_file is None else str(keys_file))
    )


def _store(config: Path | None, root: Path | None, keys_file: Path | None) -> KeyStore:
    return KeyStore(_settings(config, root, keys_file).keys_path)


CONFIG_OPTION = typer.Option(None, "--config", "-c", help="serve.yaml (for its root and keys file).")
ROOT_OPTION = typer.Option(None, "--root", help=with_default("The galleries' folder.", str(ServeConfig.root)))
KEYS_OPTION = typer.Option(None, "--keys-file", help="The keys file (default: ROOT/.serve-keys.json).")


@keys_app.command("create")
@handle_errors
def create_key(
    gallery: str = typer.Option(..., "--gallery", "-g", help="The gallery the key opens."),
    scope: list[str] = typer.Option(..., "--scope", help=f"{' or '.join(SCOPES)} (repeatable)."),
    config: Path | None = CONFIG_OPTION,
    root: Path | None = ROOT_OPTION,
    keys_file: Path | None = KEYS_OPTION,
) -> None:
    """Create a key for one gallery; the key is printed once and stored only hashed."""
    settings = _settings(config, root, keys_file)

    from reid.serve.service import places_of

    places = places_of(settings)

    def uid_of(name: str) -> str:
        uid = places.uid(name)
        if uid is None:
            raise ConfigError(f"{places.location(name)}: no gallery here; a key opens an existing gallery")
        return uid

    key, token = KeyStore(settings.keys_path).create(gallery, scope, uid_of)
    console.print(f"key {key.id} for gallery {printable(key.gallery)} ({', '.join(key.scopes)}):", soft_wrap=True)
    console.print(token, soft_wrap=True)


@keys_app.command("list")
@handle_errors
def list_keys(
    gallery: str | None = typer.Option(None, "--gallery", "-g", help="Only this gallery's keys."),
    config: Path | None = CONFIG_OPTION,
    root: Path | None = ROOT_OPTION,
    keys_file: Path | None = KEYS_OPTION,
) -> None:
    """List keys (their ids, galleries and scopes; the keys themselves are not stored)."""
    keys = _store(config, root, keys_file).list(gallery)
    print_table("keys", ["id", "gallery", "scopes", "created"], [(k.id, k.gallery, ",".join(k.scopes), timestamp(k.created)) for k in keys])


@keys_app.command("revoke")
@handle_errors
def revoke_key(
    key_id: str = typer.Argument(..., help="The key's id (from 'reid serve keys list')."),
    config: Path | None = CONFIG_OPTION,
    root: Path | None = ROOT_OPTION,
    keys_file: Path | None = KEYS_OPTION,
) -> None:
    """Revoke a key: requests with it are refused (401) from the next request on."""
    key = _store(config, root, keys_file).revoke(key_id)
    console.print(f"revoked key {key.id} of gallery {printable(key.gallery)}", soft_wrap=True)


@keys_app.command("admin")
@handle_errors
def admin_key() -> None:
    """Print a new random admin key, to keep in a key file (--admin-key-file) or REID_SERVE_ADMIN_KEY."""
    console.print(new_admin_key(), soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(serve_app, name="serve")
