-- lib/outcomes_quarantine.lua: client outcome reports and the quarantine of banned exits
-- (report_outcome, quarantine_of; lua/sweep.lua removes what has ended).

-- Remove up to `limit` ended quarantines of banned exits (report_outcome.lua); returns the
-- number removed and whether more have ended.
local function clean_quarantines(now, limit)
  local ended, more = due_members(QUAR_EXP, now, limit)
  for _, exit in ipairs(ended) do
    hdel(QUAR, exit)
    zrem(QUAR_EXP, exit)
    zrem(QUAR_EXITS, exit)
  end
  return #ended, more
end
