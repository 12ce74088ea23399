"""OpenAI's ``/v1/models``: the models this deployment serves, with their aliases, routes and live workers."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from api.auth import CallerDep
from api.openai_schemas import ModelList, ModelObject
from api.services import ApiServices, services

router = APIRouter(prefix="/v1/models", tags=["models"])
ServicesDep = Annotated[ApiServices, Depends(services)]


@router.get("", response_model=ModelList)
async def list_models(caller: CallerDep, api: ServicesDep) -> ModelList:
    """Every model a job may name, the default first: those the settings name (the default model, the
    routes') and those a worker has served, each with its aliases, routes and live workers.

    A model with no live worker is listed (its jobs are accepted and wait for one).
    """
    return ModelList(data=[ModelObject.of(model) for model in await api.client.models.models()])


@router.get("/{model_id:path}", response_model=ModelObject)  # a name may hold "/" (hub ids, paths)
async def retrieve_model(model_id: str, caller: CallerDep, api: ServicesDep) -> ModelObject:
    """One model, by its name or one of its aliases (answered as its model); ``404 model_not_found`` for a name
    nobody serves."""
    return ModelObject.of(await api.client.models.model(model_id))
