-- Argo CD health check for Bindery's kinds: AgentSpec, Tool, Resource, ResourceType and
-- ResourceGrant (group bindery.dev). One script serves all five: they report status the same way.
--
-- It reads status as kstatus (Flux, kpt) does, so Argo CD and Flux agree on every object:
--   the controller has not seen this generation yet  -> Progressing (kstatus InProgress)
--   Stalled=True: a person must change an object     -> Degraded    (kstatus Failed)
--   Reconciling=True: the next apply clears it       -> Progressing (kstatus InProgress)
--   Ready=True                                       -> Healthy     (kstatus Current)
--     (an idle agent whose session is suspended by its idle policy is Ready=True, reason
--      Suspended: Healthy, though no pod runs)
--   Ready=False, neither of the above                -> Progressing (kstatus InProgress)
-- A change to a Resource, Tool, ResourceType or ResourceGrant that some dependent agent has not
-- applied yet keeps Reconciling=True (reason RolloutPending; Delivered=False, reason Pending): it
-- reads Progressing by the rule above, never Degraded. A refusal by an agent's runtime
-- (Delivered=False, reason Refused) leaves the object's health as it was.
-- The table is in the Bindery docs (docs/design.md, "Status semantics").
-- Argo CD runs this with gopher-lua: Lua 5.1 only.
local hs = {}

local metadata = obj.metadata or {}
if metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "being deleted: the controller is releasing what it holds for it"
  return hs
end

local status = obj.status
local generation = metadata.generation
if status == nil or status.observedGeneration == nil or generation == nil
    or status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "waiting for the Bindery controller to observe generation " .. tostring(generation)
  return hs
end

local found = {}
if status.conditions ~= nil then
  for _, condition in ipairs(status.conditions) do
    if condition.type ~= nil and found[condition.type] == nil then
      found[condition.type] = condition
    end
  end
end

local function says(condition)
  local text = condition.reason or ""
  if condition.message ~= nil and condition.message ~= "" then
    if text ~= "" then
      text = text .. ": "
    end
    text = text .. condition.message
  end
  return text
end

local stalled, reconciling, ready = found["Stalled"], found["Reconciling"], found["Ready"]
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = says(stalled)
elseif reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = says(reconciling)
elseif ready == nil then
  hs.status = "Progressing"
  hs.message = "no Ready condition yet"
elseif ready.status == "True" then
  hs.status = "Healthy"
  hs.message = says(ready)
else
  hs.status = "Progressing"
  hs.message = says(ready)
end
return hs
