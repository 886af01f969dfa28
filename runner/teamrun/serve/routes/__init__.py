"""The server's routes, one ``APIRouter`` per concern; :func:`teamrun.serve.app.create_app` assembles them."""
