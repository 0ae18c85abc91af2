# Fixtures of the Python SDK tier: Basis Theory's own Python SDK (basistheoryclient) pointed at a running
# `tokenvault dev` by changing only its base URL. test/acceptance/python-sdk.test.ts starts the vault and runs pytest
# with TOKENVAULT_URL and TOKENVAULT_MANAGEMENT_KEY set; hack/python-sdk.sh makes the virtual environment.
import os
import uuid

import pytest
from basis_theory import BasisTheory


def client(key: str) -> BasisTheory:
    return BasisTheory(api_key=key, base_url=os.environ["TOKENVAULT_URL"])


@pytest.fixture(scope="session")
def url() -> str:
    return os.environ["TOKENVAULT_URL"]


@pytest.fixture(scope="session")
def management() -> BasisTheory:
    return client(os.environ["TOKENVAULT_MANAGEMENT_KEY"])


@pytest.fixture(scope="session")
def private_app(management):
    """A private application that may create, read (masked), update, delete, search and use every token and intent."""
    return management.applications.create(
        name=f"python-private-{uuid.uuid4()}",
        type="private",
        permissions=["token:create", "token:read", "token:update", "token:delete", "token:search", "token:use",
                     "token-intent:read", "token-intent:delete"],
    )


@pytest.fixture(scope="session")
def private(private_app) -> BasisTheory:
    return client(private_app.key)


@pytest.fixture(scope="session")
def public_app(management):
    return management.applications.create(
        name=f"python-public-{uuid.uuid4()}", type="public", permissions=["token:create", "token-intent:create"]
    )


@pytest.fixture(scope="session")
def public(public_app) -> BasisTheory:
    return client(public_app.key)
