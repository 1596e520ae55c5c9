-- lib/upsert_health.lua: the provider upsert and the checker's health updates (upsert,
-- apply_health, inventory). Most of their rules are in the operation files themselves.

local function set_expiry(pid, rec)
  zadd(EXP, rec.e, pid)
  local key = expiry_key(rec.u)
  zadd(key, rec.e, pid)
  touch(EXP); touch(key)
end
