/* placeholder until the module lands */
#include "dscommon.h"
#include "dsserve.h"
int ds_cmd_serve(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ds_error("this build has no serve yet");
	return 1;
}
int ds_cmd_run(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ds_error("this build has no run yet");
	return 1;
}
int ds_cmd_stop(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ds_error("this build has no stop yet");
	return 1;
}
