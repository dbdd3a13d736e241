/* modeld darwin cross-build: the one call of <mach/task.h> the build uses (see ../../README.md). */
#ifndef MODELD_CROSS_MACH_TASK_H
#define MODELD_CROSS_MACH_TASK_H
#include <mach/mach_types.h>
#include <mach/task_info.h>
kern_return_t task_info(task_name_t target_task, task_flavor_t flavor, task_info_t task_info_out,
	mach_msg_type_number_t *task_info_outCnt);
#endif
