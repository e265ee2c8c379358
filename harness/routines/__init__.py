"""Routines: tasks the harness starts by itself, on a schedule, a GitHub event or an HTTP call.

``model`` holds the values (a firing, a run, a routine's state); ``schedule`` when a routine
fires next (pure); ``template`` its prompt filled from the event (pure); ``state`` what each
routine did, kept with the tasks; ``ledger`` the "first one wins" claim that makes each firing
one task, whatever the number of bot processes; ``service`` the scheduler a front end runs,
with a launcher of its own that starts the task where its people see it.
"""
